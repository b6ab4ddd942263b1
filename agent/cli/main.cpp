#include <cstdio>
int main() { std::puts("kopt: skeleton"); return 0; }
