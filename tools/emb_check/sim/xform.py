import re, sys
s = open(sys.argv[1]).read()
s = re.sub(r'([A-Za-z_]\w*(?:<[^<>;]*>)?)<<<(.*?)>>>\((.*?)\);',
           lambda m: 'sim_run([&] { %s(%s); }, %s);' % (m.group(1), m.group(3), m.group(2)), s, flags=re.S)
s = re.sub(r'extern __shared__ (\w+) (\w+)\[\];', r'\1 *\2 = (\1 *)sim_dyn_smem();', s)
s = re.sub(r'__shared__ (\w+) (\w+)\[(.*?)\];', r'\1 *\2 = (\1 *)sim_shared(sizeof(\1) * (\3), __LINE__);', s)
assert '<<<' not in s and '__shared__' not in s
open(sys.argv[2], 'w').write(s)
