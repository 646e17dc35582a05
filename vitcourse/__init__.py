"""vitcourse: the tested reference package behind the Vision Transformer course.

Each module is one concept, introduced by one notebook (Dosovitskiy et al., "An Image is Worth
16x16 Words", ICLR 2021)::

    environment         notebook 00: the machine (quick mode, the data folder, the device) and
                        every notebook's set-up cell (`setup`)
    hosting             Colab and Kaggle: the packages around their torch, the course files
    datasets, data      notebook 00: the table of datasets and each one's course models
                        (`DatasetInfo`); `load_dataset`, `make_loaders`
    files, batching     the datasets' files (checks, downloads, offline messages); images held
                        in memory and augmented a batch at a time
    scrambling          notebook 09: images scrambled in fixed patches, a task where the ViT's
                        lack of assumptions wins (each dataset's "-scrambled" twin)
    photos              notebooks 01, 05, 09: real 224 x 224 photos, offline
    folders             notebook 10: a folder of your own images (one sub-folder per class) read
                        as a dataset
    patching            notebook 01: an image as a sequence of patches
    embedding           notebook 02: patch embedding, position embeddings
    attention           notebook 03: scaled dot-product and multi-head self-attention
    block               notebook 04: the pre-norm transformer block
    vit                 notebook 05: the whole model (`ViTConfig`, `VisionTransformer`) and
                        `count_parameters`; it imports only the four files above and torch
    presets             the named sizes (the paper's, the course's) and `preset_for(dataset)`
    pretrained          weights from timm, torchvision and transformers, and back to transformers
    deit, mae           notebook 09: the distilled ViT (DeiT) and the masked autoencoder, models
                        only (their trainers are distillation and pretraining)
    checks/             notebooks 01-09: exercise checks with hints, one module per module it
                        checks (`checks.attention` checks `attention`), a harness and a registry
    widgets, diagrams   notebooks 01-05: interactive explorers; the model drawn with its shapes
    student             student copies of the notebooks, solutions removed
    training            notebook 06: `TrainConfig`, `train_step`, and the `Trainer`'s loop
    callbacks           notebook 06: what happens around the loop (progress, checkpoints, ...)
    evaluation, clock   notebook 06: loss and accuracy on a split; the time budget's clock
    resuming            notebook 06: what a checkpoint holds; an interrupted epoch goes on
    scaling             the README's "Scaling up": mixed precision, torch.compile, torchrun
    checkpoints         notebook 06: model files saved and loaded safely; the registry of
                        model kinds (ViT, CNN, DeiT, MAE); the shipped trained models
    live                notebook 06: the live plot of curves and attention maps
    analysis            notebooks 06-08: attention rollout, attention distance, Figure 7
    cnn                 notebook 08: a small CNN, to race the ViT
    pretraining         notebook 09: masked-patch pre-training (MAE): its recipe and trainer
    distillation        notebook 09: DeiT's distillation losses and trainer
    runs, train_run     the command lines' run folder (run.json, resume, metrics, model.pt) and
                        the frozen description of a training run
    train, pretrain     python -m vitcourse.train / vitcourse.pretrain
    grade, grading      python -m vitcourse.grade: a class graded, each notebook in a sandbox
    grade_worker,       the two sandboxed steps: the notebook run, then each answer run on the
      grade_probe       check's inputs without the course's solution; the verdict is grading's
    sandbox, gradebook  bubblewrap and its limits; the journal, grades.csv, gradebook.csv, reports
    sandbox_memory,     shared memory counted in a sandbox; who a sandbox runs as (never root)
      sandbox_user
    tensorboard         notebook 10: a training run written for TensorBoard (a callback)
    lightning           notebook 10: the course's recipe as a Lightning module (the extras;
                        nothing else imports it)

Imports flow one way, from the bottom up (tests/test_package.py checks there is no cycle,
subpackages included): hosting, then environment, scaling, the data modules, then the model
pieces (patching, embedding, attention, block, vit; then presets, deit, mae, pretrained and
cnn), then checkpoints, the training
rooms (evaluation, clock, callbacks, resuming) and training, then live, pretraining and
distillation, and the command lines (runs, train_run, train, pretrain). analysis, widgets and
diagrams read the model pieces only; checks reads them and the references of training,
analysis, pretraining and distillation; student reads nothing of the package but `checks`.

Shape legend, used in every docstring and comment::

    B  batch size            C  image channels       H, W  image height and width
    P  patch size            N  patches = (H/P)(W/P) T     tokens = N + 1 (the cls token)
    D  model width           h  attention heads      d     head width = D / h
"""

__all__ = ["ViTConfig", "VisionTransformer"]
__version__ = "0.1.0"


def __getattr__(name: str):
    """`vitcourse.ViTConfig` and `vitcourse.VisionTransformer`, imported when first asked for:
    importing one module (`vitcourse.patching`, the grader's worker) loads that module and what it
    needs, not the whole model with its data layer and torchvision (seconds on a laptop)."""
    if name in __all__:
        from vitcourse import vit

        return getattr(vit, name)
    raise AttributeError(f"module 'vitcourse' has no attribute {name!r}")
