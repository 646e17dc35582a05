"""Data: one door, `load_dataset`, for Fashion-MNIST, MNIST, CIFAR-10, CIFAR-100 and your own::

    loading    notebook 00: `load_dataset`, `make_loaders`, `dataset_info`, `denormalize`
    datasets   the dataset table: one `DatasetInfo` per dataset, its classes and course models
    files      the files on disk: checked, unpacked, downloaded, or explained when missing
    batching   images kept in memory as bytes, augmented and normalised a batch at a time
    folders    notebook 10: your own images, one sub-folder per class, read as a dataset
    photos     notebooks 01, 05, 09: scikit-image's photos at the paper's 224 x 224
    sharding   each process's share of a split when several train together (torchrun)

Read `loading` first. The notebooks import from here (`from vitcourse.data import load_dataset,
load_photo`): each name is found in its room when first asked for.
"""

from vitcourse import front_door

# Where each name a notebook imports from `vitcourse.data` lives.
_ROOMS = {
    name: "data.loading"
    for name in ("QUICK_SIZES", "Loaders", "dataset_info", "denormalize", "image_transform",
                 "load_dataset", "loader_settings", "make_loaders")
} | {
    "DATASETS": "data.datasets", "DatasetInfo": "data.datasets",
    "DOWNLOAD_TIMEOUT": "data.files", "FASHION_MNIST_MD5": "data.files",
    "DatasetNotFoundError": "data.files",
    "prepare_fashion_mnist": "data.files",
    "DEFAULT_IMAGE_SIZE": "data.folders", "FolderError": "data.folders",
    "InMemoryImages": "data.batching", "random_crop_flip": "data.batching",
    "PHOTOS": "data.photos", "load_photo": "data.photos",
    "ShardSampler": "data.sharding",
}  # fmt: skip


__getattr__, __dir__ = front_door(__name__, _ROOMS)
