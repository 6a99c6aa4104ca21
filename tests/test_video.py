import numpy as np
import pytest
import torch
from PIL import Image

from pnd.io.video import VideoReadError, list_videos, read_video, uniform_indices

from helpers import write_mp4


def test_uniform_indices():
    assert uniform_indices(10, 5) == [1, 3, 5, 7, 9]
    assert uniform_indices(2, 4) == [0, 0, 1, 1]


def test_reads_mp4_gif_and_frame_folders(tmp_path):
    write_mp4(tmp_path / "a.mp4", 10)
    video = read_video(tmp_path / "a.mp4", frames=5)
    assert video.shape == (5, 3, 32, 32) and video.dtype == torch.uint8
    brightness = video.float().mean(dim=(1, 2, 3))
    assert torch.allclose(brightness, torch.tensor([20.0, 60, 100, 140, 180]), atol=6)  # frames 1,3,5,7,9

    gif = [Image.fromarray(np.full((16, 16, 3), 40 * i, dtype=np.uint8)) for i in range(4)]
    gif[0].save(tmp_path / "b.gif", save_all=True, append_images=gif[1:], duration=100)
    assert read_video(tmp_path / "b.gif", frames=2).shape == (2, 3, 16, 16)

    folder = tmp_path / "c"
    folder.mkdir()
    for i in range(3):
        Image.fromarray(np.full((8, 8, 3), i, dtype=np.uint8)).save(folder / f"{i:03d}.png")
    assert read_video(folder, frames=3)[:, 0, 0, 0].tolist() == [0, 1, 2]
    assert list_videos([tmp_path]) == [tmp_path / "a.mp4", tmp_path / "b.gif", folder]


def test_unreadable_and_missing_files_are_named(tmp_path):
    (tmp_path / "broken.mp4").write_bytes(b"not a video")
    with pytest.raises(VideoReadError, match="broken.mp4: cannot be decoded"):
        read_video(tmp_path / "broken.mp4")
    with pytest.raises(VideoReadError, match="missing.mp4: no such file"):
        read_video(tmp_path / "missing.mp4")
    with pytest.raises(OSError):
        read_video(tmp_path / "broken.mp4")
    with pytest.raises(ValueError):
        read_video(tmp_path / "broken.mp4")


def test_a_frame_folder_with_two_frame_sizes_is_a_named_read_error(tmp_path):
    for i, size in enumerate([8, 8, 16]):
        Image.fromarray(np.zeros((size, size, 3), dtype=np.uint8)).save(tmp_path / f"{i}.png")
    with pytest.raises(VideoReadError, match=r"frames have different sizes 8x8, 16x16"):
        read_video(tmp_path, frames=3)


def test_list_videos_walks_a_folder_tree(tmp_path):
    (tmp_path / "x" / "y" / "frames").mkdir(parents=True)
    Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(tmp_path / "x" / "y" / "frames" / "0.png")
    for name in ("x/a.mp4", "x/y/b.webm", "c.mp4", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    assert list_videos([tmp_path]) == [tmp_path / "c.mp4", tmp_path / "x/a.mp4", tmp_path / "x/y/b.webm",
                                       tmp_path / "x/y/frames"]
