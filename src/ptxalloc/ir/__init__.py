"""The intermediate representation (SPEC sections 2 and 3): what the parser builds, the analyses
read, the allocators rewrite and the emitter writes back.

* :mod:`.module` — ``Module`` (a file's items in source order) and ``Function``;
* :mod:`.instruction` — ``Instruction`` (opcode, guard, operands, roles, defs, uses),
  ``Label``, ``Raw`` (text kept verbatim), ``Removed``;
* :mod:`.operands` — ``Reg``, ``Imm``, ``Sym``, ``Vec``, ``Mem`` and the other operand forms;
* :mod:`.registers` — virtual registers: ``RegTable`` and the register classes;
* :mod:`.isa` — the ISA table: operand roles, register tuples, asynchronous operands;
* :mod:`.cfg` — basic blocks, dominators, loops, block frequencies;
* :mod:`.build` — constructors of the instructions ptxalloc inserts.
"""
