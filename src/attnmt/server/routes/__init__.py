"""One router per concern: libretranslate (LibreTranslate's /translate and /languages),
translate_file, detect, frontend (its page's settings and /suggest), v1 (attnmt's own), health, page."""
