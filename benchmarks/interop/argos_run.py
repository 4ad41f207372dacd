"""Run inside argostranslate's own environment (benchmarks/interop/argos_env.sh argostranslate),
never attnmt's: install Argos packages from files and translate with argostranslate's own API,
or split paragraphs with MiniSBD. JSON in on stdin, JSON out on stdout; attnmt is not imported.

    PY=$(benchmarks/interop/argos_env.sh argostranslate)
    echo '["Ein Hund läuft."]' | $PY benchmarks/interop/argos_run.py translate de en de_en.argosmodel
    echo '["Ein Satz. Noch einer."]' | $PY benchmarks/interop/argos_run.py split de.onnx

The caller chooses where argostranslate keeps its packages (HOME, XDG_DATA_HOME) and cuts the
network (consumers.py: unshare -n, or proxies to a closed port), so that any download fails.
"""

import json
import sys
import time


def translate(from_code, to_code, packages, texts):
    from argostranslate import package, settings, translate as argos

    for path in packages:
        package.install_from_path(path)
    installed = [(p.from_code, p.to_code, p.package_version) for p in package.get_installed_packages()]
    start = time.perf_counter()
    outputs = [argos.translate(text, from_code, to_code) for text in texts]
    seconds = time.perf_counter() - start
    translation = argos.get_translation_from_codes(from_code, to_code)
    sentencizer = type(getattr(getattr(translation, "underlying", None), "sentencizer", None)).__name__
    return {"outputs": outputs, "seconds": seconds, "installed": installed, "sentencizer": sentencizer,
            "beam_size": settings.beam_size, "packages_dir": str(settings.package_data_dir)}


def split(model, paragraphs):
    from minisbd import SBDetect

    detector = SBDetect(model, use_gpu=False)
    start = time.perf_counter()
    outputs = [detector.sentences(text) for text in paragraphs]
    return {"outputs": outputs, "seconds": time.perf_counter() - start}


def main(argv):
    texts = json.load(sys.stdin)
    if argv[0] == "translate":
        result = translate(argv[1], argv[2], argv[3:], texts)
    elif argv[0] == "split":
        result = split(argv[1], texts)
    else:
        raise SystemExit(f"argos_run.py: unknown command {argv[0]!r} (translate, split)")
    json.dump(result, sys.stdout, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
