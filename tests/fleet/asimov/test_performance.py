"""A spec's performance section: written, parsed, checked, compiled; its errors with positions."""

from __future__ import annotations

import ast

import pytest

from fleet.asimov.compiler import check_spec, compile_spec
from fleet.asimov.language.parser import parse
from fleet.asimov.loader import SPECS_DIR, module_from_compiled
from fleet.asimov.performance import HEADER, OP_CLASSES, with_performance

GPU = (SPECS_DIR / "gpu.asimov").read_text()
MODEL = {
    "gemm": {"latency_us": 5.16642, "tflops": 122.037, "fallback_us": 5.904, "kernels": 22, "error": 0.0089},
    "memory": {"latency_us": 0.989, "gbps": 8.244, "fallback_us": 2.5, "kernels": 16},
    "communication": {"latency_us": 7.7, "gbps": 10.04, "fallback_us": 2289.0, "kernels": 16, "error": 0.107},
}


def test_round_trip_write_parse_check_compile():
    text = with_performance(GPU, MODEL, "h100_bert_infer.json.gz")
    assert text.startswith(GPU.rstrip("\n"))  # the rest of the spec is unchanged
    assert f"{HEADER}: h100_bert_infer.json.gz" in text
    statements = parse(text, "gpu.asimov").statements
    assert sum(type(s).__name__ == "Performance" for s in statements) == 3
    compiled = compile_spec(text, "gpu.asimov")
    assert compiled.performance == MODEL
    ast.parse(compiled.code)
    monitor = module_from_compiled(compiled).Monitor
    assert monitor.PERFORMANCE == MODEL
    assert compiled.counters == compile_spec(GPU, "gpu.asimov").counters  # the monitor is the same


def test_writing_again_replaces_the_section():
    once = with_performance(GPU, MODEL, "first")
    again = with_performance(once, {"gemm": {"latency_us": 1.5, "tflops": 300.0}}, "second")
    assert compile_spec(again, "gpu.asimov").performance == {"gemm": {"latency_us": 1.5, "tflops": 300}}
    assert "first" not in again and again.count(HEADER) == 1


def test_a_spec_without_a_section_has_no_model():
    assert compile_spec(GPU, "gpu.asimov").performance == {}
    assert not hasattr(module_from_compiled(compile_spec(GPU, "gpu.asimov")).Monitor, "PERFORMANCE")


@pytest.mark.parametrize(("line", "column", "message"), [
    ("performance gemn = curve(latency_us=1.0)", 13, "unknown operator class 'gemn'"),
    ("performance gemm = curve(latency_us=-1.0)", 37, "latency_us cannot be negative"),
    ("performance gemm = curve(latency_us=1.0, tflops=0)", 49, "tflops must be more than 0"),
    ("performance gemm = curve(tflops=3.0)", 20, "performance gemm has no latency_us"),
    ("performance gemm = curve(latency_us=1.0, speed=2.0)", 42, "unknown performance parameter 'speed'"),
    ("performance gemm = curve(latency_us=1.0, latency_us=2.0)", 42, "parameter latency_us is given twice"),
    ("performance gemm = roofline(1.0)", 20, "a performance model must be a curve(...)"),
    ("performance gemm = curve(1.0)", 26, "curve() takes named parameters only"),
    ('performance gemm = curve(latency_us="fast")', 37, "latency_us must be a number"),
    ("performance gemm = curve(latency_us=1.0, kernels=2.5)", 50, "kernels must be a whole number"),
])
def test_a_malformed_section_is_refused_at_its_line_and_column(line, column, message):
    errors = check_spec(GPU + line + "\n", "gpu.asimov")
    assert len(errors) == 1
    (err,) = errors
    assert (err.line, err.column) == (len(GPU.splitlines()) + 1, column)
    assert message in err.message
    assert err.expected  # and says what was expected


def test_a_class_given_twice_is_refused_at_the_second():
    text = GPU + "performance gemm = curve(latency_us=1.0)\nperformance gemm = curve(latency_us=2.0)\n"
    (err,) = check_spec(text, "gpu.asimov")
    assert (err.line, err.column) == (len(GPU.splitlines()) + 2, 13)
    assert "given twice" in err.message


def test_a_syntax_error_in_the_section_has_its_position():
    (err,) = check_spec(GPU + "performance gemm curve(latency_us=1.0)\n", "gpu.asimov")
    assert (err.line, err.column) == (len(GPU.splitlines()) + 1, 18)


def test_the_spec_knows_the_classes_the_fitter_gives():
    from traces.atrace.analysis.kernel_sizes import OP_CLASSES as FITTED

    assert OP_CLASSES == FITTED  # Asimov sits below Atrace and keeps its own copy
