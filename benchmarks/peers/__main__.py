"""`python -m benchmarks.peers`: run the peer scenarios (see `benchmarks.peers.scenarios`).

The scenarios live in a module of their own: worker processes are spawned, and a spawned
process can import a module by name but not a package's ``__main__``.
"""

from benchmarks.peers.scenarios import main

if __name__ == "__main__":
    main()
