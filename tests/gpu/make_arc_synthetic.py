# make_arc_synthetic.py: 1000 synthetic ARC-Easy docs in the hub's schema (for timing `gdn eval`; the
# answers are random, so accuracy means nothing).   python3 tests/gpu/make_arc_synthetic.py OUT.jsonl
import json
import random
import sys

r = random.Random(5)
words = ('water plant energy light animal heat earth moon sun rock soil cell food air wind rain cloud river ocean '
         'forest seed root leaf gas liquid solid metal magnet force motion sound').split()
with open(sys.argv[1], 'w') as f:
    for i in range(1000):
        q = ' '.join(r.choice(words) for _ in range(r.randint(12, 40))).capitalize() + '?'
        ch = [' '.join(r.choice(words) for _ in range(r.randint(1, 6))) for _ in range(4)]
        f.write(json.dumps({'id': f'syn{i}', 'question': q, 'choices': {'text': ch, 'label': list('ABCD')},
                            'answerKey': r.choice('ABCD')}) + '\n')
