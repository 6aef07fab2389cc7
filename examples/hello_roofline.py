"""Hello, roofline: the seed tutorial (mlsysim 0.1.1's "Hello, Roofline") reproduced.

    python examples/hello_roofline.py          # same as: roofline tutorial

Part 1 runs the seed's experiments under preset="mlsysim" and prints its tables (ResNet-50 on
an A100 at batch 1..256, A100 vs H100 crossover, Llama-3.1-8B decode). Part 2 answers the same
questions per operator under the default preset; part 3 prints each number where the two
answers differ. docs/tutorials/hello_roofline.md walks through it. The logic lives in
roofline.tutorial so the CLI and the tests run exactly this.
"""

import sys

from roofline.tutorial import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
