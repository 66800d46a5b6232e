"""Benchmarks as configuration: each is one ``conf/bench/<name>.yaml`` read by one loader, so a new dataset is
a YAML file or none (``bench=custom bench.data_file=my.jsonl bench.prompt_field=text``). `spec` reads and
checks the file (`BenchmarkSpec` documents every field), `sources` finds the records, `prompts` turns them
into prompts and `load` composes the three (`load_benchmark`). No torch or ``datasets`` at import.
"""
