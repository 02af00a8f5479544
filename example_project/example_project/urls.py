from demo.views import place_order
from django.contrib import admin
from django.urls import path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("orders/", place_order),
]
