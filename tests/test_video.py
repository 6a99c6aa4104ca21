import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from pnd.io.video import VideoReadError, list_videos, read_image, read_video, uniform_indices, write_video

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


def test_frames_and_videos_numbered_without_zero_padding_are_in_number_order(tmp_path):
    """ffmpeg's `frame_%d.png` names: sorted as strings, frame_10 came before frame_2 and the video was shuffled."""
    frames = tmp_path / "frames"
    frames.mkdir()
    for i in range(1, 13):  # frame_1 .. frame_12, pixel value = frame number
        Image.fromarray(np.full((8, 8, 3), i, dtype=np.uint8)).save(frames / f"frame_{i}.png")
    assert read_video(frames, frames=12)[:, 0, 0, 0].tolist() == list(range(1, 13))
    for name in ("clip10.mp4", "clip9.mp4", "clip1.mp4"):
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in list_videos([tmp_path])] == ["clip1.mp4", "clip9.mp4", "clip10.mp4", "frames"]


def test_a_folder_of_videos_with_a_stray_image_keeps_its_videos_and_is_refused_naming_both(tmp_path):
    """A thumbnail next to videos made their folder one frame-folder video: the videos were never listed."""
    clips = tmp_path / "clips"
    clips.mkdir()
    write_mp4(clips / "a.mp4", 3)
    write_mp4(clips / "b.mp4", 3)
    Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(clips / "thumbnail.png")
    assert list_videos([tmp_path]) == [clips, clips / "a.mp4", clips / "b.mp4"]
    with pytest.raises(VideoReadError, match=r"clips: holds both video files \(a.mp4, b.mp4\) and frame images "
                                             r"\(thumbnail.png\).*Move the images"):
        read_video(clips)


def test_16_bit_grayscale_frames_are_scaled_to_8_bits(tmp_path):
    """PIL's convert("RGB") clips 16-bit values: every frame read as white. value * 255 / 65535, rounded."""
    for i, value in enumerate([0, 25700, 30000, 65535]):
        Image.fromarray(np.full((4, 4), value, dtype=np.uint16)).save(tmp_path / f"{i}.png")
    assert Image.open(tmp_path / "0.png").mode == "I;16"
    assert read_video(tmp_path, frames=4)[:, :, 0, 0].tolist() == [[0] * 3, [100] * 3, [117] * 3, [255] * 3]
    assert read_image(tmp_path / "2.png").getpixel((0, 0)) == (117, 117, 117)


def full_decode(path, frames):
    """The reference: every frame decoded, then the sampled ones picked (what read_video did up to 0.4)."""
    import av

    with av.open(str(path)) as container:
        images = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    return np.stack([images[i] for i in uniform_indices(len(images), frames)])


def write_av(path, codec, count, options=None, size=(64, 48)):
    """`count` frames of `size` (width, height), each its own, encoded with `codec` (B-frames where `options` ask)."""
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=25, options=options or {})
        (stream.width, stream.height), stream.pix_fmt = size, "yuv420p"
        for i in range(count):
            image = np.zeros((size[1], size[0], 3), dtype=np.uint8)
            image[..., 0], image[:, :i % size[0], 1] = 7 * i % 256, 200
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(stream.encode())


@pytest.mark.parametrize("name", ["a.mp4", "b.webm", "c.gif", "d.mkv", "e.avi", "f.mov"])
def test_sampled_frames_are_those_of_a_full_decode(tmp_path, name):
    path = tmp_path / name
    if name == "b.webm":
        write_video(path, torch.randint(0, 256, (13, 3, 16, 16), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)))
    elif name == "c.gif":
        gif = [Image.fromarray(np.full((16, 16, 3), 20 * i, dtype=np.uint8)) for i in range(9)]
        gif[0].save(path, save_all=True, append_images=gif[1:], duration=100)
    else:
        write_av(path, *{"a.mp4": ("libx264", 37, {"bf": "3"}), "d.mkv": ("libx264", 50, {"bf": "2"}),
                         "e.avi": ("mpeg4", 29, {"bf": "2"}), "f.mov": ("libx264", 13, None)}[name])
    for frames in (1, 4, 8, 60):
        assert np.array_equal(read_video(path, frames).permute(0, 2, 3, 1).numpy(), full_decode(path, frames))


def test_a_stream_with_more_packets_than_frames_is_decoded_again_with_its_true_count(tmp_path, monkeypatch):
    import av

    write_mp4(tmp_path / "a.mp4", 10)
    real_open = av.open

    class Doubled:
        """A container whose demuxer gives each packet twice: 20 packets for 10 frames."""

        def __init__(self, *args, **kwargs):
            self.container = real_open(*args, **kwargs)

        def __enter__(self):
            return self

        def __exit__(self, *exception):
            self.container.close()

        def __getattr__(self, name):
            return getattr(self.container, name)

        def demux(self, **streams):
            for packet in self.container.demux(**streams):
                yield packet
                yield packet

    monkeypatch.setattr(av, "open", Doubled)
    assert np.array_equal(read_video(tmp_path / "a.mp4", 5).permute(0, 2, 3, 1).numpy(),
                          full_decode(tmp_path / "a.mp4", 5))


def test_a_frame_folder_reads_only_its_sampled_frames(tmp_path, monkeypatch):
    from PIL import Image as module

    for i in range(20):
        Image.fromarray(np.full((8, 8, 3), i, dtype=np.uint8)).save(tmp_path / f"{i:02d}.png")
    opened, real_open = [], module.open
    monkeypatch.setattr(module, "open", lambda path, *args: opened.append(Path(path).name) or real_open(path, *args))
    assert read_video(tmp_path, frames=4)[:, 0, 0, 0].tolist() == [2, 7, 12, 17]  # uniform_indices(20, 4)
    assert sorted(opened) == ["02.png", "07.png", "12.png", "17.png"]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the peak memory from Linux's /proc")
def test_a_video_file_keeps_only_its_sampled_frames_in_memory(tmp_path):
    """300 frames of 320x240 are 69 MB decoded: read_video(frames=8) held them all before it returned 8. Measured in
    a new process: its peak resident memory (VmHWM; ru_maxrss would start at this process's)."""
    write_av(tmp_path / "big.mp4", "libx264", 300, size=(320, 240))
    write_av(tmp_path / "small.mp4", "libx264", 2)
    measure = ("import re, sys\nfrom pnd.io.video import read_video\n"
               "peak = lambda: int(re.search(r'VmHWM:\\s*(\\d+) kB', open('/proc/self/status').read())[1])\n"
               "read_video(sys.argv[2], 1)\n"  # the codec loaded, on another video
               "before = peak()\n"
               "read_video(sys.argv[1], 8)\n"
               "print((peak() - before) / 1024)\n")
    grown = subprocess.run([sys.executable, "-c", measure, str(tmp_path / "big.mp4"), str(tmp_path / "small.mp4")],
                           capture_output=True, text=True, check=True).stdout
    assert float(grown) < 30  # MB: 8 frames and the decoder's buffers
