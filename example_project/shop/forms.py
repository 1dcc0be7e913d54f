from django import forms

from .models import Order


class OrderForm(forms.ModelForm):
    """What the order page asks for; a bad value is sent back with its error."""

    class Meta:
        model = Order
        fields = ["email", "total_cents", "card"]

    def clean_card(self) -> str:
        card = self.cleaned_data["card"].replace(" ", "")
        if not card.isdigit() or not 12 <= len(card) <= 19:
            raise forms.ValidationError(f"{card!r} is not a card number (12 to 19 digits).")
        return card
