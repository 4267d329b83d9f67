"""Engine integrations of atom_mxfp4 (installed as ``atom_mxfp4.model_patches``): ``sglang`` is the SGLang plugin."""
