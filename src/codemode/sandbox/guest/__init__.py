"""Code that runs inside the sandbox. Standard library only; never imported by the host."""
