"""`python -m bench profile --perf` reading `perf report`: samples grouped by thread (the main
loop, librdkafka's broker threads as one) and by library, named without versions or hashes."""

from __future__ import annotations

from bench.perf_profile import library_name, main_thread, parse_report, summary

# `perf report --stdio -n --no-children --sort comm,dso,sym --field-separator '\t'`, as perf 6
# writes it (the header lines start with '#').
ROWS = [
    (" 40.00% ", "400", "rdk:broker111", "librdkafka-0cb94173.so.1", "[.] LZ4_compress_fast"),
    (" 30.00% ", "300", "hydrator  ", "libpython3.11.so.1.0", "[.] _PyEval_EvalFrameDefault"),
    (" 10.00% ", "100", "hydrator  ", "_compiled__mypyc.cpython-311-x86_64-linux-gnu.so", "[.] f"),
    ("  9.00% ", "90", "rdk:broker2", "[kernel.kallsyms]", "[k] clear_page_erms"),
    ("  6.00% ", "60", "hydrator  ", "backend_c.cpython-311-x86_64-linux-gnu.so", "[.] ZSTD_x"),
    ("  5.00% ", "50", "rocksdb:high", "something.so.2", "[.] Flush"),
]
REPORT = "\n".join(
    ["# Samples: 1K of event 'cpu-clock:ppp'", "#", *("\t".join(row) for row in ROWS), ""]
)


def test_rows_come_with_their_library_named_plainly() -> None:
    rows = parse_report(REPORT)
    assert [(r.thread, r.library, r.symbol, r.samples) for r in rows[:2]] == [
        ("rdk:broker111", "librdkafka", "LZ4_compress_fast", 400),
        ("hydrator", "Python interpreter", "_PyEval_EvalFrameDefault", 300),
    ]
    assert library_name("[kernel.kallsyms]") == "kernel"
    assert library_name("libfoo.so.3") == "libfoo"


def test_the_main_loop_is_the_busiest_thread_that_is_not_a_librarys() -> None:
    assert main_thread(parse_report(REPORT)) == "hydrator"


def test_the_summary_groups_broker_threads_and_adds_up_to_the_whole() -> None:
    text = summary(parse_report(REPORT), hz=1000)
    assert "1,000 samples at 1000 Hz: 1.0 CPU seconds" in text
    assert "| librdkafka broker threads | 0.5 | 49.0 % |" in text
    assert "| Python threads (hydrator) | 0.5 | 46.0 % |" in text
    assert "| Python threads (hydrator) | compiled core (mypyc) | 10.0 % |" in text
    assert "| 40.0 % | librdkafka broker threads | librdkafka | `LZ4_compress_fast` |" in text
