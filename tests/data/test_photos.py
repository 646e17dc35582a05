"""vitcourse.data.photos: scikit-image's photos, square and 224 x 224 by default."""

import pytest
import torch

from vitcourse.data.photos import PHOTOS, load_photo


def test_photos_ship_with_scikit_image_and_come_square():
    for name in PHOTOS:
        photo = load_photo(name, size=64)
        assert photo.shape == (3, 64, 64) and photo.dtype == torch.float32
        assert 0 <= photo.min() and photo.max() <= 1 and photo.std() > 0.05
    cat = load_photo("chelsea")
    assert cat.shape == (3, 224, 224)
    with pytest.raises(ValueError, match="unknown photo 'dog'"):
        load_photo("dog")
