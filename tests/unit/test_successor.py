"""Which line succeeds a changed quoted line (staleness/successor.py): only one git's
diff makes identifiable, and only the words that stand where the quote stood."""

from __future__ import annotations

from factbank_client.staleness.successor import new_lines_for, new_quote

LINES = ["a", "b", "port: 9443", "c", "d"]


def test_a_one_for_one_hunk_maps_the_line():
    # old lines 3-3 became new lines 4-4 (a line went in above)
    assert new_lines_for([(1, 0, 1, 1), (3, 1, 4, 1)], 3, 1, ["x", *LINES]) == (4, ["port: 9443"])


def test_a_hunk_that_deletes_or_rewrites_a_block_has_no_successor():
    assert new_lines_for([(3, 1, 2, 0)], 3, 1, LINES) is None  # deleted
    assert new_lines_for([(2, 3, 2, 9)], 3, 1, LINES) is None  # a block rewritten
    assert new_lines_for([(7, 1, 7, 1)], 3, 1, LINES) is None  # the change is elsewhere


def test_the_quoted_lines_replaced_by_a_few_more_are_taken_whole():
    assert new_lines_for([(3, 1, 3, 2)], 3, 1, LINES) == (3, ["port: 9443", "c"])
    assert new_lines_for([(3, 1, 3, 4)], 3, 1, LINES) is None  # more than two more


def test_the_words_around_the_quote_stay_out_of_the_new_quote():
    assert new_quote("  port: 8080  # api", "port: 8080", "  port: 9443  # api") == "port: 9443"
    # a quote that is not whole words of its line: the whole new line
    assert new_quote("connect(h, 8080)", "8080", "connect(h, 9443)") == "connect(h, 9443)"
    assert new_quote("listen 8080;", "listen 8080;", "listen 9443;") == "listen 9443;"
    # the surroundings changed too: the whole new line
    assert new_quote("  port: 8080  # api", "port: 8080", "port: 9443") == "port: 9443"
