"""The records of a run, as columns: their schema, the journal written while a run runs, the
Parquet file it becomes, and the one reader of all three (old ``requests.jsonl`` files too).

``schema`` fixes the columns (versioned, ``docs/records.md``); ``journal`` appends and reads Arrow
IPC batches; ``files`` finds a run's records in whatever form and folds the journal into Parquet;
``quantiles`` gives exact percentiles of any number of values in bounded memory; ``export``
writes them for other tools (``ramplab export``).
"""
