"""The web layer: routes, request and response models, encoding, lanes and security. Nothing imports it but app.main."""
