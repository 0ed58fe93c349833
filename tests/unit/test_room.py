"""benchd.store.statedir: the room held for the next start, on real files."""

import os

from benchd.store import statedir


def test_room_is_held_up_to_the_size_asked_and_given_back_at_start(tmp_path):
    root = str(tmp_path)
    assert statedir.release_room(root) == 0  # nothing held yet
    assert statedir.keep_room(root, 100_000) == 100_000
    assert os.path.getsize(os.path.join(root, statedir.ROOM)) == 100_000
    assert statedir.keep_room(root, 5) == 5  # asked for less: holds less
    assert statedir.release_room(root) == 5
    assert not os.path.exists(os.path.join(root, statedir.ROOM))


def test_no_room_is_held_when_none_is_asked(tmp_path):
    assert statedir.keep_room(str(tmp_path), 0) == 0
    assert not os.path.exists(os.path.join(str(tmp_path), statedir.ROOM))
