"""benchmarks/speed/profile_ct2.py: samples grouped by function name against hand-made perf
lines, and (where perf can sample this process's children) a run on a tiny int8 export whose
groups add up to all samples and whose int8 products show up. No test asserts a time."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from benchmarks.speed import profile_ct2
from benchmarks.speed.profile_ct2 import group_of, parse_report

PERF_LINES = """# Samples: 3K of event 'cpu-clock'
 9.50%  @libc.so.6      @[.] __memmove_avx512_unaligned_erms
 8.00%  @libctranslate2-a7.so.4.8.5 @[.] mkl_blas_avx512_sinternal_gemm_s8u8s32_kernel_b0_c_vnni
 5.00%  @libctranslate2-a7.so.4.8.5 @[.] ctranslate2::cpu::dequantize_gemm_output<(ctranslate2::cpu::CpuIsa)2>(int const*)
 4.00%  @libctranslate2-a7.so.4.8.5 @[.] ctranslate2::cpu::quantize_s8<(ctranslate2::cpu::CpuIsa)2>
 3.00%  @libctranslate2-a7.so.4.8.5 @[.] mkl_blas_avx512_sgemm_kernel_nocopy_TN_b0
 2.00%  @libctranslate2-a7.so.4.8.5 @[.] ctranslate2::cpu::softmax<(ctranslate2::cpu::CpuIsa)2>(float const*)
 1.50%  @libctranslate2-a7.so.4.8.5 @[.] ctranslate2::ops::TopK::compute<(ctranslate2::Device)0, float, int>
 1.00%  @libctranslate2-a7.so.4.8.5 @[.] ctranslate2::cpu::add<(ctranslate2::cpu::CpuIsa)2, float>
 0.75%  @libpython3.11.so.1.0 @[.] _PyEval_EvalFrameDefault
 0.50%  @[kernel.kallsyms] @[k] exc_page_fault
 0.25%  @libgomp.so.1 @[.] gomp_barrier_wait
"""


def test_parse_report_groups_by_hand():
    shares = parse_report(PERF_LINES)
    assert shares == {"int8 matrix products": 8.0, "quantize / dequantize": 9.0, "float32 matrix products": 3.0,
                      "softmax": 2.0, "top-k and beam search": 1.5, "memory copies": 9.5, "other CTranslate2": 1.0,
                      "Python (tokenizing, the call)": 0.75, "kernel": 0.5, "other": 0.25}
    assert group_of("libctranslate2.so", "ctranslate2::cpu::dequantize_gemm_output") == "quantize / dequantize"


def _perf_works() -> bool:
    if shutil.which("perf") is None:
        return False
    probe = subprocess.run(["perf", "stat", "-e", "task-clock", "true"], capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(not _perf_works(), reason="perf is not installed or may not sample here")
def test_profile_ct2_on_a_tiny_int8_export(tmp_path, transformer_run_dir, check_schema, capsys):
    pytest.importorskip("ctranslate2")
    from attnmt.engines.ctranslate2_export import export_run

    export = tmp_path / "int8"
    export_run(transformer_run_dir, export, quantization="int8")
    out = tmp_path / "profile.json"
    # the toy run's corpus has a "test" split; enough sentences repeated for perf to see work
    assert profile_ct2.main([str(export), "--split", "test", "--threads", "1", "--beam", "2",
                             "--frequency", "4999", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    check_schema(report, "profile_ct2")
    (row,) = report["results"]
    assert row["sentences"] > 0 and row["seconds"] > 0
    assert sum(row["groups"].values()) == pytest.approx(100.0, abs=1.0)
    assert "int8 matrix products" in capsys.readouterr().out


def test_profile_ct2_refuses_bad_numbers(capsys):
    assert profile_ct2.main(["x", "--beam", "0"]) == 2
    assert "must be >= 1" in capsys.readouterr().err
