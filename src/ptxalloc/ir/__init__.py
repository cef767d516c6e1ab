"""The intermediate representation: modules, functions, instructions, operands, virtual
registers, the ISA table and the analyses of the control flow."""
