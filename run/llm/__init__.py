"""The LLM fine-tuning workload: torchtune's own recipes, extended and fed by our components.

    spec.py      what a run spec holds, how it is checked and named, what cannot run (no torch)
    launch.py    what the sweep does with a spec: preflight, skip reason, the command (no torch)
    config.py    the torchtune config of a run, built from its spec (`prepare` checks it first)
    tune.py      the entry point, `python -m run.llm.tune --run-dir DIR`: runs the recipe
    catalog.py   the data sets and templates as data (no torch, no torchtune)
    data/        the data files: readers, generated sets, template subsets and DPO pairs, the
                 torchtune `dataset:` block; `python -m run.llm.data` prints subset token counts
    assets.py    the data folder, the byte tokenizer, the real Llama3-8B folder
    tiny.py      the tiny llama3: its architecture, its files, and the builders named in configs
    weights.py   the `random` weights mode: a checkpointer that returns random Llama3-8B weights
    metrics.py   the metric logger torchtune instantiates from the config (steps.jsonl, summary)
    recipes.py   loads torchtune's installed recipe files by path and extends their classes
    compat.py    shims for torchtune's distributed recipes on CPU (no effect where CUDA exists)

Imports go one way: tune -> config -> data/, catalog, assets, tiny, recipes, metrics, spec;
launch -> config, spec; spec -> catalog. Nothing imports tune, and only the sweep's registry
(run/sweep/workloads.py) imports launch. Run-folder file names live in run/store.py.
"""
