"""Evaluations: GSM8K A/B through lm-eval (`gsm8k`, `stats`, `mock_server`) and the MXFP4 accuracy study
(`accuracy`). Installed as `atom_mxfp4.evals`; exposed as `atom-mxfp4 eval ...` through `evals.cli`."""
