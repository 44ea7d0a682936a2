import sys
from pathlib import Path

# Lets tests import the mutant catalogue as `mutants.<module>`.
sys.path.insert(0, str(Path(__file__).resolve().parent))
