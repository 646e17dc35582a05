"""vitcourse.cli.train_options: `python -m vitcourse.train`'s options, in their groups."""

import argparse

import pytest

from vitcourse.cli.train_options import add_options


def test_the_options_come_in_the_groups_help_shows():
    parser = argparse.ArgumentParser()
    add_options(parser)
    titles = [group.title for group in parser._action_groups]
    assert any("pre-trained weights and teachers" in (title or "") for title in titles)
    args = parser.parse_args(["--stem", "16,32", "--init", "a.pt", "--freeze"])
    assert args.stem_channels == (16, 32) and args.freeze and str(args.init) == "a.pt"
    with pytest.raises(SystemExit):
        parser.parse_args(["--stem", "16;32"])  # a clear usage error, not a traceback
