from django.contrib import admin
from django.urls import path

from shop import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("orders/", views.orders, name="orders"),
    path("orders/<int:pk>/", views.order, name="order"),
]
