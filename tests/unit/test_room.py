"""benchd.store.room: the room held for the next start, on real files."""

import os

from benchd.store import room


def test_room_is_held_up_to_the_size_asked_and_given_back_at_start(tmp_path):
    root = str(tmp_path)
    assert room.release(root) == 0  # nothing held yet
    assert room.keep(root, 100_000) == 100_000
    assert os.path.getsize(os.path.join(root, room.ROOM)) == 100_000
    assert room.keep(root, 5) == 5  # asked for less: holds less
    assert room.release(root) == 5
    assert not os.path.exists(os.path.join(root, room.ROOM))


def test_no_room_is_held_when_none_is_asked(tmp_path):
    assert room.keep(str(tmp_path), 0) == 0
    assert not os.path.exists(os.path.join(str(tmp_path), room.ROOM))
