from bench.data.corpus import corpus


def test_held_out_text_is_excluded_even_with_stray_whitespace_in_the_file(tmp_path):
    """SST-2's train.tsv ends every sentence with a space and the task loader strips it: the
    corpus once compared unstripped lines with stripped dev texts and excluded nothing."""
    (tmp_path / "sst2").mkdir()
    rows = ["a film that is held out ", "a film that stays in the corpus ", "another kept sentence here"]
    (tmp_path / "sst2" / "train.tsv").write_text("sentence\tlabel\n" + "".join(f"{r}\t1\n" for r in rows))
    texts, described = corpus(tmp_path, [], exclude={"a film that is held out"})
    assert sorted(texts) == ["a film that stays in the corpus", "another kept sentence here"]
    assert "sst2/train.tsv" in described and "minus the task's dev and test text" in described


def test_the_task_text_is_the_fallback_without_a_data_directory():
    texts, described = corpus(None, ["one two three", "x", "four five six"], exclude={"four five six"})
    assert texts == ["one two three"] and described.startswith("the task's training text")
