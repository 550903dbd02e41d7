"""Methods of a class template that launch over the object's members: `Store<long> s(5000); s.fill(v, 300);`
with `fill` launching `put<K><<<..>>>(slots, v, len, capacity)`. The method's callers are the calls on objects of
the class's instantiations; a member the constructor sets (body or initializer list) is the constructor's
argument at the object's declaration; the class template's parameter K is the object's class argument; the
member buffer the constructor allocates is counted with those values. A member the program also changes elsewhere
stays a todo."""
from __future__ import annotations

from mepgen.spec import load_spec
from mep_apps import make_app, run

SOURCE = """
    template <typename K>
    __global__ void put(K* slots, const K* v, int len, int capacity)
    { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < len) slots[(unsigned)v[i] % capacity] = v[i]; }
    template <typename K>
    __global__ void zap(K* slots, int capacity)
    { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < capacity) slots[i] = K(0); }

    template <typename K>
    class Store {
    public:
        explicit Store(int cap) : capacity(cap * 2) { cudaMalloc(&slots, capacity * sizeof(K)); }
        void fill(const K* v, int len) { put<K><<<(len + 63) / 64, 64>>>(slots, v, len, capacity); }
        void reset();
        K* slots;
        int capacity;
    };
    template <typename K>
    void Store<K>::reset() { zap<K><<<(capacity + 255) / 256, 256>>>(slots, capacity); }

    int main()
    {
        Store<long> s(5000);
        long* v;
        cudaMalloc(&v, 300 * sizeof(long));
        s.fill(v, 300);
        s.reset();
        return 0;
    }
"""


def _mep(app, kernel):
    path = app / ".mepgen" / "meps" / kernel / "mep.yaml"
    return load_spec(path), path.read_text()


def test_methods_of_a_class_template_launch_with_the_objects_values(tmp_path):
    app = make_app(tmp_path, SOURCE)
    r = run("--all", "-C", app)
    assert r.exit_code == 0, r.output
    zap, text = _mep(app, "zap")
    assert zap.todo == [] and zap.launch.callee == "zap<long>"
    assert zap.param("capacity").value in ("5000 * 2", "(5000 * 2)")
    assert "set by the constructor of Store" in text and "the object `s`" in text
    put, _ = _mep(app, "put")
    assert put.todo == [] and put.launch.callee == "put<long>"
    assert put.param("len").value == "300"
    assert put.param("slots").count.replace(" ", "").strip("()") in ("5000*2", "(5000*2)")


def test_a_member_changed_elsewhere_is_not_the_constructors(tmp_path):
    app = make_app(tmp_path, SOURCE.replace("void reset();", "void reset();\n        void grow() { capacity += 64; }"))
    run("zap", "-C", app)
    zap, _ = _mep(app, "zap")
    fields = {t.field for t in zap.todo}
    assert "params[1].value" in fields and "launch" in fields, fields


def test_an_object_sized_from_the_input_is_the_inputs(tmp_path):
    """`this->capacity = capacity;` in the template's constructor (a member access libclang leaves unresolved), the
    object made from a count read with fscanf: the launch's size is the input's, a todo of kind `file`."""
    app = make_app(tmp_path, """
        #include <cstdio>
        template <typename K>
        __global__ void mark(int* flags, const K* keys, const int capacity)
        { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < capacity) flags[i] = keys[i] != K(0); }
        template <typename K>
        class Table {
        public:
            Table(int capacity) { this->capacity = capacity; cudaMalloc(&keys, capacity * sizeof(K)); }
            int count_all();
            K* keys;
            int capacity;
        };
        template <typename K>
        int Table<K>::count_all()
        {
            int* flags;
            cudaMalloc(&flags, capacity * sizeof(int));
            mark<K><<<(capacity + 255) / 256, 256>>>(flags, this->keys, capacity);
            return 0;
        }
        int main(int argc, char** argv)
        {
            int n = 0;
            FILE* f = fopen(argv[1], "r");
            fscanf(f, "%d", &n);
            Table<unsigned> t(n * 2);
            return t.count_all();
        }
    """)
    run("mark", "-C", app)
    spec, _ = _mep(app, "mark")
    assert spec.launch.callee == "mark<unsigned int>"
    assert [t.kind for t in spec.todo] == ["file"], [(t.field, t.reason) for t in spec.todo]
