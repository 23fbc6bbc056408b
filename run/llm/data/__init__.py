"""The LLM data files: primitives apart from the data sets (run/llm/catalog.py lists those).

    readers.py    JSON Lines / JSON array files read a row at a time, written atomically; row
                  checks; LLM_DATASETS_DIR's files and the offline Hugging Face loader
    synthetic.py  the tiny model's generated sets (alpaca, grammar, samsum, slimorca)
    subsets.py    template subsets, DPO preference pairs, and the torchtune `dataset:` block
    counting.py   tokens of a tokenised torchtune data set (for the recipes and tokens.py)
    tokens.py     `python -m run.llm.data`: make the files, print the subsets' token counts

Imports go one way: tokens -> subsets -> synthetic -> readers; counting imports nothing. Nothing
is re-exported here: callers name the module a function lives in.
"""
