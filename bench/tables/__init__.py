"""One module per kept study (bench/results/<study>/): the tables the docs
quote, generated from the study's results.csv (bench/doc_tables.py)."""
