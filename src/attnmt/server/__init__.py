"""The HTTP service: `attnmt serve RUN_DIR`.

    settings.py   ServeSettings: address, limits, access rules
    schemas.py    pydantic models of every request and response
    errors.py     {"error": ...} for every failure
    batcher.py    micro-batching of concurrent requests, the model in one worker thread
    service.py    the loaded model as the routes see it
    documents.py  HTML (markup.py) and uploaded files translated through the models
    filestore.py  the translated files: a server-owned folder, random names, expiry
    routes/       libretranslate.py, files.py, v1.py, health.py, page.py (one router per concern)
    app.py        create_app: routers, body limit, CORS, lifespan (loads the model once)
    command.py    serve_command: uvicorn, graceful shutdown
    static/       the page (index.html, app.js, style.css) and the offline API reference
"""
