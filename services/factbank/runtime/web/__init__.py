"""The web layer both services share: auth, the input guard, error mapping, health, and the app
factory."""
