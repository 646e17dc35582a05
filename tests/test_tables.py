"""vitcourse.language.print_table: the notebooks' tables, sized by their words in any language."""

import pytest

from vitcourse.language import print_table, table


def test_columns_are_as_wide_as_their_widest_entry():
    text = table(["patch", "N tokens"], [["4x4", 49], ["14x14", 4]])
    assert text.splitlines() == ["patch  N tokens", "4x4          49", "14x14         4"]


def test_a_longer_header_widens_its_column_and_the_rows_follow():
    english = table(["class", "recall"], [["Bag", "0.97"]]).splitlines()
    spanish = table(["clase", "exhaustividad"], [["Bolso", "0.97"]]).splitlines()
    assert english[1].endswith("0.97") and spanish[1].endswith("0.97")
    assert len(spanish[1]) == len(spanish[0]) > len(english[1])


def test_whole_numbers_get_thousands_commas_and_text_is_left_as_it_is():
    assert table(["n", "x"], [["a", 38416], ["b", "93.10%"]]).splitlines()[1:] == [
        "a  38,416",
        "b  93.10%",
    ]


def test_a_row_of_the_wrong_length_is_a_clear_error():
    with pytest.raises(ValueError, match="a table row has 1 cells, its header 2"):
        table(["a", "b"], [["only one"]])


def test_print_table_prints_it(capsys):
    print_table(["a", "b"], [["x", 1]])
    assert capsys.readouterr().out == "a  b\nx  1\n"
