"""atom_mxfp4/evals/serve_check.py's compare: what the agreement tables report (no server needed)."""

from atom_mxfp4.evals.serve_check import compare, compare_table


def run(ids, logprobs, top, hidden):
    return {"prompt_tokens": 20, "output_ids": ids, "logprobs": logprobs, "top_logprobs": top, "last_hidden": hidden}


def doc(*runs):
    return {"agreement": {"runs": list(runs)}}


def test_compare_counts_the_agreeing_prefix_and_the_shared_top_candidates():
    top_b = [[[-1.0, 7], [-2.0, 3], [-3.0, 4], [-4.0, 5], [-5.0, 6]]]
    top_c = [[[-1.1, 7], [-2.0, 3], [-3.0, 9], [-4.0, 5], [-5.0, 8]]]
    base = run([7, 1, 2], [-1.0, -0.5, -0.25], top_b, [1.0, 0.0])
    cand = run([7, 1, 9], [-1.1, -0.7, -3.0], top_c, [1.0, 1.0])
    (row,) = compare(doc(cand), doc(base))
    assert row["tokens_agree"] == 2 and row["tokens"] == 3
    assert abs(row["first_logprob_diff"] - 0.1) < 1e-9 and abs(row["mean_logprob_diff"] - 0.15) < 1e-9
    assert row["top5_overlap"] == 3
    assert row["last_hidden_rel_l2"] is None  # the sequences differ: their last hidden states are not comparable
    (same,) = compare(doc(run([7, 1, 2], [-1.0, -0.5, -0.25], top_b, [1.0, 1.0])), doc(base))
    assert same["tokens_agree"] == 3 and same["top5_overlap"] == 5 and abs(same["last_hidden_rel_l2"] - 1.0) < 1e-9
    table = compare_table([row, same], ("c", "b"))
    assert "| 20 | 2/3 | 0.1 | 3/5 | 0.15 | - |" in table and "| 20 | 3/3 | 0 | 5/5 | 0 | 1 |" in table
