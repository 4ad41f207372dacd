"""One router per concern: libretranslate (LibreTranslate's API), v1 (attnmt's own), health, page."""
