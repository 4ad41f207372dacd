"""Models from and to other toolkits' formats: Marian / OPUS-MT checkpoints in the Hugging Face
`transformers` layout (marian.py), read and written without `transformers` itself; Argos Translate
packages for argostranslate and LibreTranslate (argos/), written from and read into CTranslate2
exports."""
