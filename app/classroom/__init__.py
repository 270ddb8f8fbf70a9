"""The classroom layer: live class rooms and their stores (memory, Redis), and the hooks the page calls."""
