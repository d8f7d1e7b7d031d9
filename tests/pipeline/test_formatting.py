"""Numbers, levels and axis values as the tables and figures write them (formatting.py)."""

from __future__ import annotations

import math

from ldpsim.pipeline.formatting import (
    axis_labels,
    cell_text,
    fmt_name,
    format_level,
    named_text,
    parameter_text,
    sample_size_text,
    summary_line,
)


def test_a_length_of_ten_or_more_keeps_three_decimals_and_a_large_se_two_digits():
    # A mutation hunt (h21e): three decimals at least (a length of 12.3 is not cut to
    # 12.35 -> 2 decimals), and a diverged run's se in two significant digits.
    assert cell_text(12.345, 0.5, True) == "12.345 (0.500)"
    assert cell_text(1.234e66, 5.67e64, True) == "1.23e+66 (5.7e+64)"
    # A length of 0 (every interval a point) has no magnitude to take three digits of.
    assert cell_text(0.0, 0.0, True) == "0.000 (0.000)"


def test_exponent_form_and_the_noise_threshold_at_their_boundaries():
    # A mutation hunt (h21e): exactly 1e6 is written in exponent form; an se of exactly
    # 1e-9 of the value is rounding noise in both forms ((0), (0.000)), not '<0.001'.
    assert cell_text(1e6, 1.0, False) == "1e+06 (1)"
    assert cell_text(1.5e7, 1e-9 * 1.5e7, False) == "1.5e+07 (0)"
    assert cell_text(0.5, 1e-9 * 0.5, False) == "0.500 (0.000)"


def test_sample_sizes_at_1000_and_that_are_not_whole():
    # A mutation hunt (h21e): 1000 is compact as every larger round n, a fractional n
    # keeps its fraction, and a checkpoint is a sample size as n is.
    assert sample_size_text(1000) == "1e3" and sample_size_text(1000, "latex") == "$10^{3}$"
    assert sample_size_text(2.5) == "2.5"
    assert named_text("checkpoint", 50000, "text") == "5e4"
    assert named_text("d", 50000, "text") == "50000"
    # A text n is a parameter's text, LaTeX-escaped as any other.
    assert named_text("n", "a_b", "latex") == r"a\_b"


def test_format_level_has_every_digit_and_no_trailing_zero():
    # A mutation hunt (h21e): 0.9 is '90%' (not '90.0%' nor the binary expansion of 0.9).
    assert [format_level(q) for q in (0.9, 0.95, 0.5, 0.9999999)] == [
        "90%",
        "95%",
        "50%",
        "99.99999%",
    ]


def test_axis_labels_at_their_edges():
    # A mutation hunt (h21e): an axis reaching exactly 1000 is compact, 10 among its
    # values too; a fraction keeps the axis in full; no value gives no label.
    assert axis_labels([100, 1000], "text") == ["1e2", "1e3"]
    assert axis_labels([10, 1000], "text") == ["1e1", "1e3"]
    assert axis_labels([12.5, 1000.0], "text") == ["12.5", "1000"]
    assert axis_labels([], "text") == []


def test_parameter_texts_of_floats_ints_and_infinity():
    # A mutation hunt (h21e): every digit of a float, an int in full (d = 1000000, not
    # 1e+06), infinity as a symbol in LaTeX and as 'inf' in text.
    assert parameter_text(0.9999999, "text") == "0.9999999"
    assert parameter_text(10**6, "text") == "1000000"
    assert parameter_text(math.inf, "latex") == r"$\infty$"
    assert parameter_text(math.inf, "text") == "inf"
    assert parameter_text(-math.inf, "text") == "-inf"


def test_column_names_in_latex():
    # A mutation hunt (h21e): symbols for the known names, any other escaped.
    assert fmt_name("n", "latex") == "$n$" and fmt_name("eps", "latex") == r"$\varepsilon$"
    assert fmt_name("huber_c", "latex") == r"huber\_c"
    assert fmt_name("huber_c", "text") == "huber_c"


def test_summary_line_joins_a_wrapped_first_paragraph():
    # A mutation hunt (h21e): the summary is the first paragraph whole, on one line.
    doc = "The median length\n  of the intervals.\n\nMore   text here."
    assert summary_line(doc) == "The median length of the intervals."
    assert summary_line("  a\tb  c ") == "a b c"
    assert summary_line("") == ""
