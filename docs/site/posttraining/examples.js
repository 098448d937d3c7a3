window.BENCH_EXAMPLES = {};
