//! Create a sparse array, write cells, read some back by typed ranges and
//! a condition built in Rust. `cargo run -p tdb --example sparse [DIR]`.

use tdb::{
    field, Array, ArraySchema, ArrayType, AttributeBuilder, Datatype, DimensionBuilder,
    FieldBuffer, ReadSpec, WriteSpec,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = match std::env::args().nth(1) {
        Some(d) => std::path::PathBuf::from(d),
        None => std::env::temp_dir().join(format!("tdb-example-{}", std::process::id())),
    };
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("x", 0i64..=999).tile_extent(100i64))
        .attribute(AttributeBuilder::new("temp", Datatype::Float64))
        .attribute(AttributeBuilder::new("city", Datatype::StringUtf8).var())
        .build()?;
    let array = Array::create(&dir, &schema)?;

    // Cells in any order: a sparse write sorts them.
    let cities = ["Oslo", "Lima", "Pune", "Kyiv", "Nice"];
    let mut x = FieldBuffer::new("x", Datatype::Int64, 1, false);
    let mut temp = FieldBuffer::new("temp", Datatype::Float64, 1, false);
    let mut city = FieldBuffer::new("city", Datatype::StringUtf8, tdb::VAR_NUM, false);
    for (i, name) in cities.iter().enumerate() {
        x.push(&(i as i64 * 10).to_le_bytes(), true);
        temp.push(&(12.5 + i as f64 * 3.0).to_le_bytes(), true);
        city.push(name.as_bytes(), true);
    }
    let written = array.write(WriteSpec::new(vec![x, temp, city]))?;
    println!("wrote {} cells into {}", written.cells, written.fragment);

    let array = Array::open(&dir)?;
    let spec = ReadSpec::new(["x", "temp", "city"])
        .range(array.schema(), "x", 10..=40)?
        .with_condition(field("temp").gt(15.0).and(field("city").ne("Kyiv")));
    for batch in array.read(spec)? {
        let batch = batch?;
        let (xs, temps, names) = (
            batch.fields[0].column(),
            batch.fields[1].column(),
            batch.fields[2].column(),
        );
        for i in 0..batch.num_cells as usize {
            let x = i64::from_le_bytes(xs.cell(i).try_into()?);
            let t = f64::from_le_bytes(temps.cell(i).try_into()?);
            let name = std::str::from_utf8(names.cell(i))?;
            println!("x = {x:>3}  temp = {t:>5.1}  city = {name}");
        }
    }
    if std::env::args().nth(1).is_none() {
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}
