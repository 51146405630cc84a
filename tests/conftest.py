import sys
from pathlib import Path

# Let test modules import the small builders in tests/sim/simkit.py.
sys.path.insert(0, str(Path(__file__).parent / "sim"))
# ... and the shared rule for real-cluster tests in tests/realcluster.py.
sys.path.insert(0, str(Path(__file__).parent))
