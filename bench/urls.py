"""The admin, for INPUT10M's timing of the job list."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
