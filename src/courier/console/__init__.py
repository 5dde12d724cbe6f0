"""The management console: a read-mostly web view over Courier's database.

``app.create_app(settings)`` builds the Starlette application; ``courier console``
serves it with uvicorn. Pages are rendered by Jinja2 and refreshed by a small script
that polls the JSON API behind each page; the few admin actions need a token.
"""
