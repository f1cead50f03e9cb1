from redlib.book.linkcheck import broken_links


def test_internal_links_and_anchors_are_checked(tmp_path):
    (tmp_path / "a.html").write_text('<h1 id="top">A</h1><a href="b.html#sec">ok</a><a href="b.html#nope">bad anchor</a>'
                                     '<a href="c.html">missing</a><a href="https://example.org/x">external</a>'
                                     '<a href="#top">self</a>')
    (tmp_path / "b.html").write_text('<section id="sec"></section>')
    assert broken_links(tmp_path) == ["a.html -> b.html#nope (no such anchor)", "a.html -> c.html (no such file)"]
