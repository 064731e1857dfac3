//! `sales`: revenue by country, a small relational query: the orders under
//! `orders=BUCKET/PREFIX` (lines `order,customer,cents`) joined on the customer with the
//! customers under `customers=BUCKET/PREFIX` (lines `customer,name,country`), summed by the
//! customer's country, and written as lines `country<TAB>amount` (`1234.05`) to `part-NNNNN`
//! objects under `output=BUCKET/PREFIX`. An order of no known customer counts nowhere; a line
//! that does not parse fails the job, naming the line; blank lines are skipped.
//!
//! Five stages: two loads, the two sides' scatters by customer (the join), and a scatter that
//! pairs them, sums each partition's amounts by country and sends each country's sum to its
//! partition; then the store.

use mote_sdk::job::{Job, Text};

fn driver(job: &mut Job) {
    let customers = job
        .lines("customers")
        .filter(|line| !line.trim().is_empty())
        .try_map(customer);
    job.lines("orders")
        .filter(|line| !line.trim().is_empty())
        .try_map(order)
        .join(customers)
        .map(|(_customer, (cents, country))| (country, cents))
        .reduce_by_key(|a, b| a + b)
        .save_lines("output", |(country, cents)| {
            format!("{country}\t{}.{:02}", cents / 100, cents % 100)
        });
}

/// `customer,name,country` as `(customer, country)`.
fn customer(line: Text) -> Result<(u64, String), String> {
    match line.split(',').collect::<Vec<_>>()[..] {
        [id, _name, country] => Ok((number(id, &line)?, country.trim().to_owned())),
        _ => Err(format!(
            "customer line {line:?} is not customer,name,country"
        )),
    }
}

/// `order,customer,cents` as `(customer, cents)`.
fn order(line: Text) -> Result<(u64, u64), String> {
    match line.split(',').collect::<Vec<_>>()[..] {
        [_order, customer, cents] => Ok((number(customer, &line)?, number(cents, &line)?)),
        _ => Err(format!("order line {line:?} is not order,customer,cents")),
    }
}

fn number(field: &str, line: &str) -> Result<u64, String> {
    field
        .trim()
        .parse()
        .map_err(|_| format!("{field:?} in line {line:?} is not a whole number"))
}

mote_sdk::job!(driver);

#[cfg(test)]
mod tests {
    use mote_sdk::job::local::{LocalError, LocalJob};

    fn job(orders: &str) -> LocalJob {
        LocalJob::new(super::driver)
            .partitions(2)
            .arg("customers", "data/customers")
            .arg("orders", "data/orders")
            .arg("output", "results/sales")
            .object("data/customers/a", "1,Ann,DE\n2,Bo,FR\n\n3,Cy,DE\n")
            .object("data/orders/a", orders.as_bytes().to_vec())
    }

    #[test]
    fn sums_orders_by_their_customers_country() {
        let out = job("10,1,100\n11,3,250\n12,2,5\n13,9,999\n").run().unwrap();
        let mut lines = out.lines("results/sales");
        lines.sort();
        assert_eq!(lines, ["DE\t3.50", "FR\t0.05"]);
    }

    #[test]
    fn a_line_that_does_not_parse_fails_the_job_naming_it() {
        let err = job("10,1,100\n11,x,250\n").run().unwrap_err();
        let LocalError::Task { message, .. } = &err else {
            panic!("{err}")
        };
        assert!(
            message.contains("sales::order returned an error: \"x\" in line \"11,x,250\""),
            "{err}"
        );
    }
}
